from django.urls import path

from . import views

urlpatterns = [
    path('', views.index, name='index'),
    path('page/', views.page, name='page'),
    path('db/', views.workload, name='db'),
    path('form/', views.form, name='form'),
    path('form/thanks/', views.thanks, name='thanks'),
    path('upload/', views.upload, name='upload'),
    path('stream/', views.stream, name='stream'),
    path('hello/<str:name>/', views.hello, name='hello'),
    path('café/', views.cafe, name='cafe'),
]
